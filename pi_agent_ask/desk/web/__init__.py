"""The web desk: the question desk's board as a page, served beside ``/mcp``.

``app.py`` (routes, the live stream, commands to the forms), ``view.py`` (board snapshots to
view values; the page's drafts checked), ``auth.py`` (one-time sign-in codes, sessions,
CSRF tokens, the sign-in limit), ``security.py`` (headers and request checks), ``history.py``
(each agent's history and its Markdown export), ``login.py`` (``pi-agent-ask desk
login-url``). Templates and static assets are inside the package; ``docs/web.md`` is the guide.
"""
