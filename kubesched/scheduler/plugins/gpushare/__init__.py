"""GPU-sharing scheduling: the published FGD simulator's plugins (hkust-adsl/kubernetes-scheduler-simulator,
`pkg/simulator/plugin/`), one file each: the GPU-share Filter/Reserve (Open-Gpu-Share), its binder (Simon)
and the six Score policies (RandomScore, DotProductScore, GpuClusteringScore, GpuPackingScore,
BestFitScore, FGDScore). The device model is `kubesched.cluster.gpu`; fragmentation `kubesched.cluster.gpufrag`.
"""
