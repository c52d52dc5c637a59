"""The spec layer: the ``JobSpec`` value and the rules between its fields (``model``), how
plain data becomes one (``structuring``, ``load``, ``yamlio``), every rule it is checked by
(``rules``, ``resource_rules``, ``pod_rules``, ``k8s_*``), what kfcompile adds to a job
(``additions``), torchrun's options (``torchrun``), the errors and paths problems are told
with, and the spec's JSON Schema (``json_schema``)."""
