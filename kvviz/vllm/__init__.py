"""vLLM 0.33's rules, engine side: pages and block sizes (`pages`), grouping (`grouping`),
layouts (`planners`) and the plan of a model (`plan`)."""
