"""The commands of `kubesched`, one module each, loaded only when their command runs (`kubesched.cli`).

Each module defines its click command as `cli`; `common.py` holds the conventions they share.
"""
