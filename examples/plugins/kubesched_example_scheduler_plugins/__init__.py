"""Example third-party plugins for kubesched (see README.md)."""
