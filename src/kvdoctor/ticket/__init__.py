"""Incident tickets in markdown: the diagnosis section kept between markers (`sections`) and the
remedy a ticket states, read from its prose (`words`)."""
