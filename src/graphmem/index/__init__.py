"""The local search index: every derived row in the home's SQLite database and its ranking.

``db`` opens the database (migrations, healing, the transaction helper); ``storage`` holds every
statement on the search tables; ``local_index.LocalIndex`` adds the models; ``snapshot`` and
``view`` keep the ranking arrays; ``ranker``, ``late`` and ``rerank`` are the ranking stages,
``local_search`` answers a query and ``local_backend`` serves the façade; ``tuning`` holds every
knob. Session, turn and step listings live in ``index.episode_index``.
"""
