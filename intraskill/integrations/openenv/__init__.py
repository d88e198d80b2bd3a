"""The store as an OpenEnv environment (the ``openenv`` extra: ``pip install 'intraskill[openenv]'``).

:mod:`.models` (typed action, observation, state), :mod:`.environment` (the environment over the engine),
:mod:`.server` (the app, served by ``intraskill env serve --protocol openenv``) and :mod:`.client`
(OpenEnv's client for it). Every module imports ``openenv``; this package file does not. See
``docs/openenv.md``.
"""
