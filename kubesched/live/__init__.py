"""kubesched.live"""
