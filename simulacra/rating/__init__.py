"""Importance rating and reflection, the rater of seed 003, as a library: the offline backend (ridge regression and
k-nearest neighbours over embeddings of a labelled set of rated memories, :mod:`.backends`), the language-model
backend (:mod:`.llm`), the offline reflector (:mod:`.reflection`), the one lenient parser of rating and reflection
answers (:mod:`.parsing`), the check of a model's ratings against the labelled set (:mod:`.quality`) and the
evaluations of both backends (:mod:`.evaluate`, :mod:`.evaluate_reflection`). ``rater_server`` serves them over HTTP
(a Flask app) and imports this package; nothing here imports ``rater_server``.
"""
