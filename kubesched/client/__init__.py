"""The client seam: what components do to a cluster, in the API server's own verbs.

`interface.Client` is the protocol; `inprocess.InProcessAPIServer` serves it over a `ClusterState` for the
one-shot commands, `simulated.SimulatedAPIServer` adds the API server's admission and name generation for
the simulator; the live mode's client talks to a real API server.
"""
