"""kfcompile inside other launchers: a TorchX scheduler (``kfcompile[torchx]``) and a NeMo-Run
executor (``kfcompile[nemo]``). Like the CLI, these are outer code over the public API
(``render``, ``lifecycle``, the ports); nothing in the core imports them, and importing
``kfcompile`` never imports torchx or nemo_run.
"""
