"""Files fmcluster writes for the user (job scripts, plan pages, diagrams, rule files, reports): signed so that a later
run knows them again (`marker`), and written so that nothing else is ever replaced (`write`)."""
