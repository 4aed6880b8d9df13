from bench.quality.harness import main

raise SystemExit(main())
