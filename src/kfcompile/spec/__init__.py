"""The spec layer: the ``JobSpec`` value (``model``), how plain data becomes one
(``structuring``, ``load``, ``yamlio``), every rule it is checked by (``rules``,
``cross_field``, ``resource_rules``, ``pod_rules``, ``k8s_*``), what kfcompile adds to a job
(``additions``), torchrun's options (``torchrun``), the errors and paths problems are told
with, and the spec's JSON Schema (``json_schema``)."""
