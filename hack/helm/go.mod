// Builds helm (hack/k8s/build-helm.sh) from its published module.
module wpbench.local/helmbuild

go 1.26.0

require helm.sh/helm/v3 v3.22.0
