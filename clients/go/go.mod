module fencelock

go 1.19
