"""Push delivery (SPEC section 8): the server consumes a push group's queues and POSTs each job to
its endpoint. manager.py keeps one PushGroup (group.py) per configured group in each process;
delivery.py makes one POST; the configurations are admin/pushers.py's."""
