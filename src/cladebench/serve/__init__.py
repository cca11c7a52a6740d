"""``cladebench serve``: a local web app to browse a dataset, look at one image, search, and read runs over it.

Server-rendered pages (FastAPI on uvicorn, jinja2 with autoescape) and a few lines of plain JavaScript served from
this package: no CDN, no build step, it works offline. The dataset is opened read-only at the version it had when
the server started, so every page (and every cached thumbnail, keyed by that version) describes one state of it.

The modules:

- :mod:`~cladebench.serve.app`: :func:`~cladebench.serve.app.create_app`, the app with its safety middleware,
  the static files and every registered area mounted.
- :mod:`~cladebench.serve.areas`: :data:`~cladebench.serve.areas.AREAS`, the registry of areas (a router, and
  optionally a link in the top bar).
- :mod:`~cladebench.serve.pages`: the one jinja2 environment and :func:`~cladebench.serve.pages.render`.
- :mod:`~cladebench.serve.state`: :class:`~cladebench.serve.state.ServeState`, what areas share (the dataset,
  the loaded runs, caches), reached in a handler through a parameter ``state: AppState``.
- :mod:`~cladebench.serve.security`: tokens and the check of every request.
- :mod:`~cladebench.serve.config`: :class:`~cladebench.serve.config.ServeConfig`, the options of the verb.
- :mod:`~cladebench.serve.server`: the server's start (socket, URL, token) and stop.

How an area plugs in (each area is one module; ``browse`` is the example to copy):

1. Write ``serve/<area>.py`` with ``router = APIRouter()`` and its handlers. A handler takes
   ``request: Request`` and ``state: AppState`` (from :mod:`~cladebench.serve.state`) and returns
   ``render(request, "<area>/<page>.html", **context)``. Handlers are plain ``def`` (FastAPI runs them in its
   thread pool: Lance reads block, and two requests must not wait on each other).
2. Register it at the end of the module: ``AREAS.add("<area>", Area(router=router, title="Nav title",
   path="/<area>", order=N))``; ``title=None`` keeps it out of the top bar.
3. Add the module's name to the import line of :mod:`~cladebench.serve.app` (the list of areas).
4. Templates go in ``serve/templates/<area>/`` and start with ``{% extends "base.html" %}`` and fill
   ``{% block content %}`` (``{% block title %}`` for the tab title). Static files go in ``serve/static/`` and are
   linked as ``{{ static('name') }}``.
5. Who is asking: ``request.state.user`` (the owner of the token the request carried, or the local user when
   the server is bound to this machine without tokens). Never take a person's name from a form field.
6. A form that writes sends ``POST`` with the ``csrf`` value the base template puts in
   ``<meta name="csrf">`` (the middleware refuses a write without it).
"""
