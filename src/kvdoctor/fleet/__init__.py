"""Fleet scans: `kvdoctor scan` over many logs, on a local process pool or on Ray."""
