"""kubesched.descheduler"""
