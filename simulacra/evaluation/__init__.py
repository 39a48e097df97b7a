"""Evaluation harness after the Generative Agents paper (Park et al., arXiv 2304.03442, section 7): scenarios
(:mod:`.scenario`), the behaviour they set up in a run (:mod:`.setup`), metrics from traces and interviews
(:mod:`.metrics`), ablation variants (:mod:`.variants`) and the ``simulacra evaluate`` report (:mod:`.report`)."""
