"""The MCP server (``mcp_server.py``: graphmem's tools for agents, over stdio or HTTP) and its
HTTP auth (``mcp_auth.py``)."""
