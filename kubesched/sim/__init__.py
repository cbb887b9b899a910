"""kubesched.sim"""
