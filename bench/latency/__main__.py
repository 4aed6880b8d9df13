from bench.latency.harness import main

raise SystemExit(main())
