"""Session listing: the session, turn and step tables and their background writer.

Their own package, beside search and not part of it: these rows answer "which sessions, which
turns" (lists and recents), never a ranked query. They share the home's database and its
transaction helper (``index.db``) and nothing else of ``index/``; the writer hands the search
side its items through the ``LocalBackend`` a job carries.
"""
