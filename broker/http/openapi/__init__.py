"""The OpenAPI document: ``document`` puts it together from the route table; one module
per area (``agent_api``, ``record``, ``inbox``, ``push``, ``operator``, ``mcp``, ``health``)
says its paths' operations and schemas; ``shared`` holds what they share."""
