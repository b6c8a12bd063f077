"""The cluster as the planners see it: pods, nodes and the objects kube-scheduler reads (`objects`),
resource quantities (`quantity`, `resources`), every label, taint, annotation and resource name the
scaler spells (`keys`), what a pod or node is to a drain or a GPU count (`workload`), and field errors
(`errors`)."""
