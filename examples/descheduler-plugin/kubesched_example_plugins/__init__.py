"""Example third-party descheduler plugins for kubesched."""
