"""Built-in scheduler plugins, one file each (see kubesched.scheduler.registry for the names)."""
