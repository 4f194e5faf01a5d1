"""Live dependency ceilings: probes that read how many slots a dependency can give the workers now.

``headroom`` holds what a probe reads; ``postgres``, ``pgbouncer``, ``mysql``, ``redis`` and
``http`` read it; ``registry`` refreshes each probe on its own interval (one per profile, shared
by every trigger that names it), and ``limit`` turns a reading into a number of workers.
"""
