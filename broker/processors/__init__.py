"""Request processors, one module per request family.

Each module holds its processor class, built from the narrow collaborators it uses
(store, managers, clock, the broker's identity, the config values it reads), and a
``register(registry, processor)`` that maps its request codes to the processor's
methods. :mod:`rocklet.broker.wiring` builds them all from the app's collaborators;
no processor sees :class:`~rocklet.broker.context.BrokerContext`.
"""
