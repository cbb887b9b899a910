"""Policy search (`kubesched tune`) and grids of runs (`kubesched sweep`), on a local process pool or Ray."""
