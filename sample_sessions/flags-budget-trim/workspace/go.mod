module example.com/checkout

go 1.22
