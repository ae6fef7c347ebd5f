mod ab;
