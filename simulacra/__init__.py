"""simulacra: generative-agent town simulations with a three-tier memory (seed 003).

Importing this package opens no database, loads no model and reads no environment variable;
everything heavy happens when a :class:`~simulacra.simulation.Simulation` is built.
"""

__version__ = "0.1.0"
