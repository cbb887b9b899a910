"""kubesched.metrics"""
