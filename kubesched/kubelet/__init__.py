"""kubesched.kubelet"""
