"""What the cluster accepts, checked on rendered objects before anything is printed or sent:
the CRDs' limits per release (``limits``) and the core/v1 pod rules no schema carries
(``kfcompile.spec.pod_rules``) on the merged pods, both run by ``check``; and an object against a
served CRD's schema (``crd``)."""
