"""Reading other agents' session files into one neutral model of what each model call saw.

``model.py`` is the model; ``observations.py`` recognises file views, search hits and
traceback frames in tool output; one module per format parses its files
(``swe_agent.py``, ``claude_code.py``); ``detect.py`` tells the format of a file. Nothing
here writes to a store.
"""
