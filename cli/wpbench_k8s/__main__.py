from wpbench_k8s.cli import main

main()
