"""A real cluster: the read side (client, capture of objects and usage history)."""
