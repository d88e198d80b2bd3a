"""The bilingual report: execute the pipeline notebooks with papermill, then render the pages with Quarto,
or, where Quarto is not installed, with the static renderer in :mod:`intraskill.report.site`."""
