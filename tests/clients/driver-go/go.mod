module fencelock-conformance-driver

go 1.19

require fencelock v0.0.0

replace fencelock => ../../../clients/go
