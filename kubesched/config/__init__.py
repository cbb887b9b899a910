"""kubesched.config"""
