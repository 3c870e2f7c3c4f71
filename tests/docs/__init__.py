"""The documentation's own tests: links resolve, no history in the text, commands run, references complete."""
