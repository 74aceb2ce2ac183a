"""The subcommands that start a server: ``desk`` (a desk of files, or a team desk on a store),
``mcp`` and ``hook`` (the stdio server, on its own, on a desk or on a team's desks) and
``store``. They sit above the packages they choose between, so those never import each other
to decide which one runs."""
