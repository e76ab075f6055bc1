"""Reports: other views of a run folder, for the places where people already look.

Pure rendering. ``view`` turns the documents of a run folder (read by
``orchestrator.services.run_folders``) into frozen values; ``html``, ``markdown``,
``junit`` and ``annotations`` turn those values into text. Nothing here decides a
lane or changes one: every lane, code and reason comes from the run folder as written.
"""
