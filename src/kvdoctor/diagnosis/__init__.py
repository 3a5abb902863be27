"""The diagnosis: YAML rules, their condition language, the engine that fires them over an
attempt's facts, the rule examples as tests, and the `Report` every face renders."""
