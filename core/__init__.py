"""Core helpers: the bottom layer of Strata, importing nothing from the project.

Layers (highest first; each imports only from layers below it): the doors (``api``:
Kafka listener and handlers, REST, CLI, dashboard) > the broker domain > {``tiering``,
the codec ``kwire`` and client ``kclient``} > ``hot`` > ``core``.
"""
