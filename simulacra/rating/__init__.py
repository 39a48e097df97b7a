"""Importance rating and reflection, the rater of seed 003, as a library: the offline backend (ridge regression and
k-nearest neighbours over embeddings of a labelled set of rated memories, :mod:`.backends`), the language-model
backend (:mod:`.llm`), the offline reflector (:mod:`.reflection`), the one lenient parser of rating and reflection
answers (:mod:`.parsing`), the check of a model's ratings against the labelled set (:mod:`.quality`) and the
evaluations of both backends (:mod:`.evaluate`, :mod:`.evaluate_reflection`). ``rater_server`` serves them over HTTP
(a Flask app) and imports this package; nothing here imports ``rater_server``.
"""

#: the HTTP rater's request limits, one place for the server's validation (``rater_server``) and the client's
#: requests: memories per ``POST /rate/batch``, memories per ``POST /reflect``
MAX_BATCH, MAX_REFLECT = 1024, 500
#: memories per ``POST /rate/batch`` that :class:`simulacra.rater.RaterClient` sends (a tick's new memories in
#: requests of at most this many): the offline rater embeds them one by one under ``embedding.exact``, measured
#: 28 ms each on 2 cores (1,024 took 28-29 s in bench.cognition at 1,000 residents, at the edge of the client's
#: 30 s ``rater.timeout_s``), so 256 take about 7 s
CLIENT_BATCH = 256
