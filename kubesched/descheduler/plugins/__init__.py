"""kubesched.descheduler.plugins"""
