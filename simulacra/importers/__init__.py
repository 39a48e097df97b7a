"""Towns brought from other projects: each importer reads that project's files at run time and writes a simulacra
world file and persona files that pass ``simulacra check`` (``simulacra import <format> ...``).

* :mod:`simulacra.importers.generative_agents`: a Generative Agents storage folder (Park et al. 2023,
  github.com/joonspk-research/generative_agents), with its map when given.
"""
